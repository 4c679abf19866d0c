"""Experience in and out (1.13's ``ray.rllib.offline``): JSON files of sampled batches,
readers that feed them to workers in place of their envs, and off-policy estimators.

``config["output"]`` makes every sampling worker write its batches (:class:`JsonWriter`);
``config["input"]`` makes workers read batches instead of stepping their envs
(:class:`JsonReader`, :class:`MixedInput`, :class:`DatasetReader` through Ray Data), and
``off_policy_estimation_methods`` reports estimates of the trained policy's value from
what they read (``rlstack.offline.estimators``).
"""

from rlstack.offline.dataset_reader import DatasetReader
from rlstack.offline.input_reader import InputReader
from rlstack.offline.io_context import IOContext
from rlstack.offline.json_reader import JsonReader
from rlstack.offline.json_writer import JsonWriter
from rlstack.offline.mixed_input import MixedInput
from rlstack.offline.output_writer import NoopOutput, OutputWriter
from rlstack.offline.shuffled_input import ShuffledInput

__all__ = ["DatasetReader", "IOContext", "InputReader", "JsonReader", "JsonWriter", "MixedInput", "NoopOutput",
           "OutputWriter", "ShuffledInput"]
