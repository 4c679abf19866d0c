"""RLlib 1.13's ``ray.rllib.utils.spaces``: helpers over nested (Tuple / Dict) spaces
(``space_utils``) and the extra spaces ``Repeated`` and ``Simplex``."""
