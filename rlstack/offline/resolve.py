"""A worker's readers, writers and estimators, from the config keys ``input``,
``output`` and ``off_policy_estimation_methods`` (``input_evaluation``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlstack.errors import ConfigError
from rlstack.offline.input_reader import InputReader
from rlstack.offline.io_context import IOContext
from rlstack.offline.output_writer import OutputWriter

ESTIMATORS = {
    "is": "rlstack.offline.estimators.importance_sampling:ImportanceSampling",
    "wis": "rlstack.offline.estimators.weighted_importance_sampling:WeightedImportanceSampling",
    "ImportanceSampling": "rlstack.offline.estimators.importance_sampling:ImportanceSampling",
    "WeightedImportanceSampling": "rlstack.offline.estimators.weighted_importance_sampling:WeightedImportanceSampling",
}


def reads_input(config: dict) -> bool:
    """Whether workers read experience rather than only sample their envs."""
    return config.get("input", "sampler") != "sampler"


def make_input_reader(config: dict, ioctx: IOContext) -> InputReader | None:
    """The reader ``config["input"]`` names, wrapped in a ShuffledInput when
    ``shuffle_buffer_size`` > 1; None for ``"sampler"``.

    Raises:
        ConfigError: An input that is none of the accepted forms or names no file.
    """
    source = config.get("input", "sampler")
    if source == "sampler":
        return None
    try:
        reader = _reader(source, ioctx)
    except ValueError as err:
        raise ConfigError(f"input: {err}") from err
    size = int(config.get("shuffle_buffer_size") or 0)
    if size > 1:
        from rlstack.offline.shuffled_input import ShuffledInput

        seed = config.get("seed")
        reader = ShuffledInput(reader, size, None if seed is None else seed + ioctx.worker_index)
    return reader


def registered_input(source: Any) -> Callable[[IOContext], InputReader] | None:
    """The creator registered under the name ``source`` with Tune's
    ``register_input(name, creator)`` (1.13's way to name a custom input), else None."""
    if not isinstance(source, str) or source in ("sampler", "dataset"):
        return None
    from ray.tune.registry import registry_contains_input, registry_get_input

    return registry_get_input(source) if registry_contains_input(source) else None


def _reader(source: Any, ioctx: IOContext) -> InputReader:
    if isinstance(source, InputReader):
        return source
    if callable(source):
        return source(ioctx)
    creator = registered_input(source)
    if creator is not None:
        return creator(ioctx)
    if source == "dataset":
        from rlstack.offline.dataset_reader import DatasetReader

        return DatasetReader(ioctx)
    if isinstance(source, dict):
        from rlstack.offline.mixed_input import MixedInput

        return MixedInput(source, ioctx)
    if isinstance(source, (str, list, tuple)):
        from rlstack.offline.json_reader import JsonReader

        return JsonReader(source, ioctx)
    raise ValueError(f"{source!r} is not an input: use 'sampler', a path / glob / directory (or a list), "
                     "'dataset' with input_config, {source: probability}, or fn(ioctx) -> InputReader")


def make_output_writer(config: dict, ioctx: IOContext) -> OutputWriter | None:
    """The writer ``config["output"]`` names; None when it is None.

    Raises:
        ConfigError: An output that cannot be written.
    """
    target = config.get("output")
    if target is None:
        return None
    if isinstance(target, OutputWriter):
        return target
    if callable(target):
        return target(ioctx)
    if not isinstance(target, str):
        raise ConfigError(f"output must be None, a directory, 'logdir' or fn(ioctx) -> OutputWriter, got {target!r}")
    from rlstack.offline.json_writer import JsonWriter

    fmt = (config.get("output_config") or {}).get("format", "json")
    try:
        if fmt == "parquet":
            from rlstack.offline.parquet_writer import ParquetWriter

            return ParquetWriter(ioctx.log_dir if target == "logdir" else target, ioctx)
        return JsonWriter(target, ioctx, max_file_size=config.get("output_max_file_size", 64 * 1024 * 1024),
                          compress_columns=config.get("output_compress_columns"))
    except ValueError as err:
        raise ConfigError(str(err)) from err


def estimation_methods(config: dict) -> dict[str, dict]:
    """``{name: {"type": ...}}`` from ``off_policy_estimation_methods`` or, if that is
    empty, 1.12's ``input_evaluation`` list.

    Raises:
        ConfigError: A malformed entry.
    """
    methods = config.get("off_policy_estimation_methods") or {}
    if not isinstance(methods, dict):
        raise ConfigError("off_policy_estimation_methods must be a dict {name: {'type': 'is' | 'wis' | Class}}, "
                          f"got {methods!r}")
    out = {}
    for name, spec in methods.items():
        if not isinstance(spec, dict) or "type" not in spec:
            raise ConfigError(f"off_policy_estimation_methods[{name!r}] must be a dict with a 'type' "
                              f"('is', 'wis', a class or 'module:Class'), got {spec!r}")
        out[str(name)] = spec
    legacy = config.get("input_evaluation") or []
    if not out and legacy:
        if not isinstance(legacy, (list, tuple)):
            raise ConfigError(f"input_evaluation must be a list such as ['is', 'wis'], got {legacy!r}")
        for entry in legacy:
            name = entry if isinstance(entry, str) else getattr(entry, "__name__", str(entry))
            out[name.rsplit(":", 1)[-1]] = {"type": entry}
    for name, spec in out.items():
        kind = spec["type"]
        if isinstance(kind, str) and kind not in ESTIMATORS and ":" not in kind and "." not in kind:
            raise ConfigError(f"off-policy estimator {name!r}: unknown type {kind!r}; use one of "
                              f"{sorted(ESTIMATORS)}, an OffPolicyEstimator subclass or its 'module:Class' path")
    return out


def make_estimators(config: dict, policy: Any) -> list[Any]:
    """The estimators of :func:`estimation_methods`, each on ``policy``."""
    from rlstack.offline.estimators.off_policy_estimator import OffPolicyEstimator
    from rlstack.utils.imports import import_object

    estimators = []
    for name, spec in estimation_methods(config).items():
        kind = spec["type"]
        cls = import_object(ESTIMATORS.get(kind, kind)) if isinstance(kind, str) else kind
        if not (isinstance(cls, type) and issubclass(cls, OffPolicyEstimator)):
            raise ConfigError(f"off-policy estimator {name!r}: {kind!r} is not an OffPolicyEstimator subclass")
        options = {k: v for k, v in spec.items() if k != "type"}
        estimators.append(cls(name, policy, options.pop("gamma", config.get("gamma", 0.99)), **options))
    return estimators


def check_offline_config(config: dict) -> None:
    """Checks ``input``, ``output`` and the estimators before any worker starts: files
    that exist, probabilities that sum to 1, known estimators.

    Raises:
        ConfigError: Naming the key, the value and the fix.
    """
    source = config.get("input", "sampler")
    if source == "sampler" or (isinstance(source, str) and registered_input(source) is not None):
        pass
    elif isinstance(source, (str, list, tuple)) and source != "dataset":
        from rlstack.offline.json_reader import expand_paths

        try:
            expand_paths(source)
        except ValueError as err:
            raise ConfigError(f"{err}: record experience there first (a run with output: DIR writes it) or point "
                              "input at existing files") from err
    elif isinstance(source, dict):
        from rlstack.offline.json_reader import expand_paths

        # The numbers first: a wrong sum is the error whatever the paths hold.
        for key, probability in source.items():
            if not isinstance(probability, (int, float)) or isinstance(probability, bool) or probability < 0:
                raise ConfigError(f"input[{key!r}] must be a probability >= 0, got {probability!r}")
        total = float(sum(source.values()))
        if abs(total - 1.0) > 1e-6:
            raise ConfigError(f"input: the probabilities of {list(source)} sum to {total:g}, not 1; rescale them")
        for key in source:
            if isinstance(key, str) and key != "sampler":
                try:
                    expand_paths(key)
                except ValueError as err:
                    raise ConfigError(f"input: {err}") from err
    elif source == "dataset":
        cfg = config.get("input_config") or {}
        if not cfg.get("path") or cfg.get("format", "json") not in ("json", "parquet"):
            raise ConfigError("input: 'dataset' needs input_config={'format': 'json' | 'parquet', 'path': FILES}, "
                              f"got input_config={cfg!r}")
    elif not callable(source) and not isinstance(source, InputReader):
        raise ConfigError(f"input must be 'sampler', a path / glob / directory (or a list), 'dataset', "
                          f"{{source: probability}} or fn(ioctx) -> InputReader, got {source!r}")
    size = config.get("shuffle_buffer_size", 0)
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ConfigError(f"shuffle_buffer_size must be an integer >= 0, got {size!r}")
    limit = config.get("output_max_file_size")
    if not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0:
        raise ConfigError(f"output_max_file_size must be a number of bytes > 0, got {limit!r}")
    columns = config.get("output_compress_columns")
    if columns is not None and (isinstance(columns, str) or not all(isinstance(c, str) for c in columns)):
        raise ConfigError(f"output_compress_columns must be a list of column names, got {columns!r}")
    fmt = (config.get("output_config") or {}).get("format", "json")
    if fmt not in ("json", "parquet"):
        raise ConfigError(f"output_config['format'] must be 'json' or 'parquet', got {fmt!r}")
    output = config.get("output")
    if output is not None and not isinstance(output, (str, OutputWriter)) and not callable(output):
        raise ConfigError(f"output must be None, a directory, 'logdir' or fn(ioctx) -> OutputWriter, got {output!r}")
    estimation_methods(config)
