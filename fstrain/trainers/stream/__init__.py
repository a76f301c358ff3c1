"""Training from a version's files a piece at a time (data larger than memory): the streaming
family, one module per part.

- :mod:`~fstrain.trainers.stream.source` — **where the rows come from**: a version's split files
  as one :class:`~.source.StreamSource` (files, their units, the view's shaper) and reading one
  piece of them; :func:`~.source.version_source` is the one route by which every trainer that
  reads files (Spark MLlib, the streamed torch loop, the Ray Data feeders of Ray Train,
  distributed XGBoost/LightGBM) gets a version's verified files.
- :mod:`~fstrain.trainers.stream.pieces` — **who reads which rows, in which order**: pieces
  dealt to ranks, seeded shuffle windows, exact batch counts, resuming mid-epoch (pure
  functions over unit sizes).
- :mod:`~fstrain.trainers.stream.prep` — **the train-fitted preprocessing**: fitted in one
  streamed pass over the train split and applied to every piece.
- :mod:`~fstrain.trainers.stream.split` — **one process**: a split as the torch loop's streamed
  dataset (``torch.streaming: true``).
- :mod:`~fstrain.trainers.stream.ray_feed` — **Ray Train workers**: each rank's pieces read and
  preprocessed by Ray Data and fed to its worker (``--workers N``).

Which engine reads the files is chosen once, in :mod:`fstrain.trainers.engine`.
"""
