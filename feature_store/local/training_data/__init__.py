"""Training-dataset versions of the local backend: the store that creates, reads, verifies and
deletes a version's pinned split files, the streamed write path, text (csv/jsonl) split writing,
label distributions and transformation statistics fitted on the train split."""
