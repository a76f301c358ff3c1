"""Readers of a training-dataset version's split files, in batches (split streams) or as text
pieces, knowing nothing of the trainers that consume them."""
