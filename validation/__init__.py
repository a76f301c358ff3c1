"""Model validation: what a reviewer reads before a version is approved.

:mod:`.evaluate` evaluates one model on its validation and test rows (:mod:`.metrics` with
bootstrap intervals, :mod:`.calibration`, :mod:`.bias` slices and :mod:`.fairness` disparities
on the helper columns, :mod:`.explain` SHAP explanations) and judges it by :mod:`.gates`;
:mod:`.scorecard` and :mod:`.model_card` render the result (:mod:`.bias_tables` with the
gates' verdicts from :mod:`.verdicts`, :mod:`.signoff`; the card's generated
:mod:`.model_card_facts` beside the owner's :mod:`.model_card_owner` texts), :mod:`.report_site`
indexes every version (:mod:`.report_index` writes it from the registry after every run and
sign-off) and :mod:`.review_page` renders its latest scorecard with the sign-offs since.
Nothing here touches a backend: the model-validation pipeline loads the model and the data and
records the result through the model registry.
"""
