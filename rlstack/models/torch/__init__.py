"""The torch implementation of the catalog's models and action distributions."""
