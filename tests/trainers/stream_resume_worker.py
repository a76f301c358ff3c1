"""Subprocess of the streamed pipeline's kill-and-resume test (not a test module itself).

    python stream_resume_worker.py ROOT TRAINING_DATASET_VERSION MODEL_NAME CONFIG_JSON [KILL_AT]

Runs the training pipeline (``pipelines.training.run``) on the ``adult`` use case with the
trainer config CONFIG_JSON, which streams the version (``torch.streaming``). With KILL_AT, the
loop's ``on_step`` hook sends this process SIGKILL right after optimizer step KILL_AT (after a
mid-epoch checkpoint, before the next one); the pipeline's ``train_torch_streamed`` (the name
``pipelines.training`` calls) is called with that hook, nothing else changes.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import sys


def main() -> None:
    root, version, name, config = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    kill_at = int(sys.argv[5]) if len(sys.argv) > 5 else None
    import feature_store
    from pipelines import training

    def on_step(step: int) -> None:
        if step == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    # patched where the pipeline looks the name up (it imports it at its top)
    training.train_torch_streamed = functools.partial(training.train_torch_streamed,
                                                      on_step=on_step)
    project = feature_store.login(root=root)
    ref = training.run(project, training.TrainingPipelineConfig(
        use_case="adult", training_dataset_version=version, model_name=name,
        model=json.loads(config)))
    print(json.dumps(ref.to_dict()))


if __name__ == "__main__":
    main()
