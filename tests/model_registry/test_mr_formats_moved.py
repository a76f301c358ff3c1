"""``model_registry.formats`` moved to ``fstrain.trainers.formats`` (each flavour's save and load
beside its trainer); for one release the old module still hands out every name, each with a
``DeprecationWarning`` naming the new home."""

from __future__ import annotations

import pytest


def test_every_moved_name_is_still_handed_out_with_a_warning():
    import fstrain.trainers.formats as new
    import model_registry.formats as old

    assert set(old.__all__) == set(new.__all__) and "save_xgboost" in new.__all__
    for name in new.__all__:
        with pytest.warns(DeprecationWarning, match=rf"fstrain\.trainers\.formats\.{name}\b"):
            assert getattr(old, name) is getattr(new, name)


def test_a_from_import_of_the_old_path_works_and_warns():
    with pytest.warns(DeprecationWarning, match="goes in the next release"):
        from model_registry.formats import load_xgboost, save_xgboost
    from fstrain.trainers.formats import load_xgboost as load, save_xgboost as save

    assert (save_xgboost, load_xgboost) == (save, load)


def test_a_name_it_never_had_is_an_attribute_error():
    import model_registry.formats as old

    with pytest.raises(AttributeError, match="no attribute 'save_onnx'"):
        old.save_onnx  # noqa: B018
