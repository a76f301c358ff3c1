"""Tools around the pipelines, each behind one ``fstrain`` command: :mod:`.doctor`
(``fstrain doctor``: what is wrong with a run or a model), :mod:`.ablation` (``fstrain ablate``:
what each feature group is worth, with paired-bootstrap intervals) and
:mod:`.feature_selection` (``fstrain select-features``)."""
