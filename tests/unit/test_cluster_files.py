"""The cluster-launcher files (cluster/aws.yaml, cluster/azure.yaml) against the Ray we pin.

No cloud calls: each file goes through the steps `ray up` takes before it talks to a
provider (``prepare_config``, which merges the provider's defaults.yaml, then
``validate_config``, which checks Ray's JSON schema; see ``_bootstrap_config`` in
``ray/autoscaler/_private/commands.py``), so a misspelled or mistyped field fails here as it
would in ``ray up``. The schema leaves ``provider`` and ``node_config`` open (they go to the
cloud's own API), so typos there are only caught by the cloud. The other tests pin what
users rely on: the dashboard on 127.0.0.1, token authentication on every ``ray start``, the
token file where Ray reads it, rlstack installed on every node type under constraints.txt,
an optional GPU worker type, and the image's Ray matching the pinned Ray.
"""

from __future__ import annotations

import copy
import re
import shlex
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

import ray
from ray.autoscaler._private.providers import _get_default_config
from ray.autoscaler._private.util import prepare_config, validate_config

REPO = Path(__file__).resolve().parents[2]
PROVIDERS = ["aws", "azure"]
# The project's checkout and the token file on each node, as the setup commands expect them.
PROJECT_MOUNT = "~/rlstack"
TOKEN_MOUNT = "~/.ray/auth_token"
IMAGE = re.compile(r"^rayproject/ray:(?P<ray>\d+\.\d+\.\d+)-py(?P<py>3\d+)-(?P<platform>cpu|gpu|cu\d+)$")


def _raw(provider: str) -> dict[str, Any]:
    with open(REPO / "cluster" / f"{provider}.yaml") as f:
        return yaml.safe_load(f)


def _prepared(config: dict[str, Any]) -> dict[str, Any]:
    """What `ray up` validates: the file merged with Ray's defaults for its provider."""
    prepared = prepare_config(copy.deepcopy(config))
    validate_config(prepared)
    return prepared


def _pinned(package: str) -> str:
    for line in (REPO / "constraints.txt").read_text().splitlines():
        name, sep, version = line.partition("==")
        if sep and name.strip().lower() == package:
            return version.strip()
    raise AssertionError(f"{package} is not pinned in constraints.txt")


def _setup_by_node_type(prepared: dict[str, Any]) -> dict[str, list[str]]:
    """Each node type's setup commands, chosen as the launcher and autoscaler choose them.

    The head runs setup_commands + head_setup_commands (merged by prepare_config); a worker
    type's own ``worker_setup_commands`` replaces setup_commands + worker_setup_commands.
    """
    setups = {}
    for name, node_type in prepared["available_node_types"].items():
        if name == prepared["head_node_type"]:
            setups[name] = prepared["head_setup_commands"]
        else:
            setups[name] = node_type.get("worker_setup_commands", prepared["worker_setup_commands"])
    return setups


def _ray_start_env(command: str) -> dict[str, str] | None:
    """The environment a shell command line gives to its `ray start`, or None if it has none.

    Counts both ``export NAME=value; ...`` earlier on the line and ``NAME=value ray start``.
    """
    env: dict[str, str] = {}
    for segment in re.split(r";|&&|\|\|", command):
        words = shlex.split(segment)
        if words[:1] == ["export"]:
            env.update(word.split("=", 1) for word in words[1:] if "=" in word)
            continue
        assignments = []
        while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
            assignments.append(words.pop(0).split("=", 1))
        if words[:2] == ["ray", "start"]:
            return {**env, **dict(assignments)}
    return None


def _ray_start_commands(commands: list[str]) -> list[str]:
    return [command for command in commands if _ray_start_env(command) is not None]


def _flag(command: str, name: str) -> str | None:
    words = shlex.split(command.split("ray start", 1)[1])
    for i, word in enumerate(words):
        if word == name and i + 1 < len(words):
            return words[i + 1]
        if word.startswith(name + "="):
            return word.split("=", 1)[1]
    return None


@pytest.mark.parametrize("provider", PROVIDERS)
def test_file_passes_rays_own_validation(provider):
    prepared = _prepared(_raw(provider))
    assert prepared["provider"]["type"] == provider


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    "break_it",
    [
        pytest.param(lambda c: c.__setitem__("max_worker", c.pop("max_workers")), id="misspelled-top-level-key"),
        pytest.param(lambda c: c.__setitem__("max_workers", "6"), id="max_workers-as-string"),
        pytest.param(lambda c: c["available_node_types"]["ray.worker.gpu"].__setitem__(
            "min_worker", c["available_node_types"]["ray.worker.gpu"].pop("min_workers")), id="misspelled-node-type-key"),
        pytest.param(lambda c: c["available_node_types"]["ray.worker.gpu"]["resources"].__setitem__("GPU", "1"),
                     id="gpu-count-as-string"),
        pytest.param(lambda c: c["docker"].__setitem__("worker_imgae", "x"), id="misspelled-docker-key"),
    ],
)
def test_same_validation_rejects_a_broken_copy(provider, break_it):
    config = _raw(provider)
    break_it(config)
    with pytest.raises(jsonschema.ValidationError):
        _prepared(config)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_dashboard_listens_on_localhost_only(provider):
    prepared = _prepared(_raw(provider))
    head_starts = _ray_start_commands(prepared["head_start_ray_commands"])
    assert len(head_starts) == 1 and "--head" in shlex.split(head_starts[0].split("ray start", 1)[1])
    assert _flag(head_starts[0], "--dashboard-host") == "127.0.0.1", head_starts[0]
    for command in prepared["head_start_ray_commands"] + prepared["worker_start_ray_commands"]:
        assert "0.0.0.0" not in command, command
    # Ray's ports stay closed to the internet: no inbound rules added to Ray's security group.
    assert not prepared["provider"].get("security_group", {}).get("IpPermissions")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_token_auth_on_every_ray_start(provider):
    prepared = _prepared(_raw(provider))
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        starts = _ray_start_commands(prepared[key])
        assert len(starts) == 1, prepared[key]
        assert _ray_start_env(starts[0]).get("RAY_AUTH_MODE") == "token", starts[0]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_token_file_reaches_every_node_where_ray_reads_it(provider):
    from ray._private.authentication.authentication_token_setup import _get_default_token_path
    from ray.scripts.scripts import cli

    prepared = _prepared(_raw(provider))
    default_path = "~/" + _get_default_token_path().relative_to(Path.home()).as_posix()
    assert TOKEN_MOUNT == default_path
    # Local and remote: the file `ray get-auth-token --generate` writes, to the same path.
    assert prepared["file_mounts"].get(TOKEN_MOUNT) == default_path
    assert ["--generate"] in [param.opts for param in cli.commands["get-auth-token"].params]
    # The token is never written into the file, and nothing turns authentication off.
    text = (REPO / "cluster" / f"{provider}.yaml").read_text()
    assert "RAY_AUTH_TOKEN=" not in text and "RAY_AUTH_MODE=disabled" not in text


@pytest.mark.parametrize("provider", PROVIDERS)
def test_every_node_type_installs_rlstack_from_the_synced_checkout(provider):
    prepared = _prepared(_raw(provider))
    local = (REPO / prepared["file_mounts"][PROJECT_MOUNT]).resolve()
    assert local == REPO, "the checkout is synced from the directory `ray up` runs in, the repository root"
    assert ".gitignore" in prepared["rsync_filter"], "the local .venv must not be uploaded"
    for name, setup in _setup_by_node_type(prepared).items():
        installs = [c for c in setup if re.search(r"\bpip install\b.*-e '\.\[[^\]]*\btorch\b[^\]]*\]'", c)]
        assert len(installs) == 1, (name, setup)
        assert installs[0].startswith(f"cd {PROJECT_MOUNT} && ") and "-c constraints.txt" in installs[0], installs[0]
        assert any("export RAY_AUTH_MODE=token" in c and ".bashrc" in c for c in setup), (name, setup)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_optional_gpu_worker_type_and_cpu_types(provider):
    prepared = _prepared(_raw(provider))
    node_types = prepared["available_node_types"]
    gpu_types = {name: t for name, t in node_types.items() if t["resources"].get("GPU", 0) >= 1}
    assert list(gpu_types) == ["ray.worker.gpu"]
    gpu = gpu_types["ray.worker.gpu"]
    assert gpu["min_workers"] == 0 and gpu["max_workers"] >= 1
    assert IMAGE.match(gpu["docker"]["worker_image"])["platform"] != "cpu"
    cpu_worker = node_types["ray.worker.cpu"]
    assert cpu_worker["min_workers"] == 0 and cpu_worker["max_workers"] == 4 and "GPU" not in cpu_worker["resources"]
    workers = [t for name, t in node_types.items() if name != prepared["head_node_type"]]
    assert prepared["max_workers"] >= sum(t["max_workers"] for t in workers)
    # torch: the CPU build from PyTorch's CPU index on CPU nodes, PyPI's CUDA build on GPU nodes.
    for name, setup in _setup_by_node_type(prepared).items():
        uses_cpu_index = any("download.pytorch.org/whl/cpu" in c for c in setup)
        assert uses_cpu_index == (name not in gpu_types), (name, setup)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_images_carry_the_pinned_ray_and_a_supported_python(provider):
    prepared = _prepared(_raw(provider))
    pinned_ray = _pinned("ray")
    assert ray.__version__ == pinned_ray, "these files are validated with the Ray that constraints.txt pins"
    pyproject = (REPO / "pyproject.toml").read_text()
    ray_dep = next(Requirement(d) for d in re.findall(r'"(ray\[[^"]*)"', pyproject))
    assert Version(pinned_ray) in ray_dep.specifier
    requires_python = SpecifierSet(re.search(r'requires-python = "([^"]+)"', pyproject)[1])
    docker = prepared["docker"]
    images = [docker["image"]] + [t["docker"]["worker_image"]
                                  for t in prepared["available_node_types"].values() if "docker" in t]
    for image in images:
        match = IMAGE.match(image)
        assert match, f"{image} is not a rayproject/ray:<version>-py3XX-<platform> tag"
        assert match["ray"] == pinned_ray, image
        assert Version(f"3.{match['py'][1:]}") in requires_python, image


@pytest.mark.parametrize("provider", PROVIDERS)
def test_head_keeps_the_cloud_sdk_from_rays_defaults(provider):
    """Setting head_setup_commands replaces Ray's defaults, which install what its autoscaler needs."""
    raw = _raw(provider)
    defaults = _get_default_config(raw["provider"])
    for command in defaults["head_setup_commands"]:
        assert command in raw["head_setup_commands"], command
