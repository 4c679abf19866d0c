"""A numpy implementation of the catalog's dense models, for inference on rollout workers."""
