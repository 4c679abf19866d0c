"""The TensorFlow implementation of the catalog's models and action distributions, and
classic RLlib's TF model API (``tf_modelv2``, ``fcnet``, ``visionnet``, ``misc``,
``tf_action_dist``)."""
