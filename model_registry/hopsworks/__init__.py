"""The Hopsworks (``hsml``) model registry adapter: :class:`HopsworksModelRegistry`."""
