"""The TensorFlow implementation of the catalog's models and action distributions."""
