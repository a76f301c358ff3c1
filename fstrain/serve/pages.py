"""The model registry pages: every version, one version, a diff, a recorded file, sign-off."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from fstrain.kernel.errors import InvalidArgumentError, UnauthorizedError
from fstrain.serve import reads, signoff_rules
from fstrain.serve.access import Identity, Refused
from fstrain.serve.security import EMBED_PREFIX
from model_registry.naming import check_model_name

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fstrain.serve.context import ServeContext

MAX_TEXT = 4000


def _model(ctx: ServeContext, name: str, version: str) -> Any:
    check_model_name(name)
    return ctx.project.get_model_registry().get_model(name, reads.parse_version(version))


def _versions(ctx: ServeContext, name: str) -> list[int]:
    return [int(m.version) for m in ctx.project.get_model_registry().get_models(name)]


def models_page(ctx: ServeContext, request: Request, identity: Identity) -> Response:
    """Every version of every model with its status."""
    name = request.query_params.get("name", "").strip() or None
    rows, lists_all = ctx.read(lambda: reads.model_rows(ctx.project.get_model_registry(), name))
    return ctx.render(request, "models.html", {"rows": rows, "name": name or "",
                                               "lists_all": lists_all}, identity=identity)


def version_page(ctx: ServeContext, request: Request, identity: Identity) -> Response:
    """A version: status, scorecard and model card, history, lineage, sign-off form."""
    name, version = request.path_params["name"], request.path_params["version"]

    def load() -> dict[str, Any]:
        model = _model(ctx, name, version)
        return reads.version_page(model, _versions(ctx, name))

    page = ctx.read(load)
    return ctx.render(request, "version.html", {"m": page, "embed": EMBED_PREFIX,
                                                "may_sign": identity.may("sign_off")},
                      identity=identity)


def diff_page(ctx: ServeContext, request: Request, identity: Identity) -> Response:
    """Two versions of one model side by side (``?against=N``)."""
    name, version = request.path_params["name"], request.path_params["version"]
    against = request.query_params.get("against", "")

    def load() -> dict[str, Any]:
        a = _model(ctx, name, version)
        b = _model(ctx, name, against)
        return reads.diff_page(a, b)

    return ctx.render(request, "diff.html", {"d": ctx.read(load)}, identity=identity)


def embedded_file(ctx: ServeContext, request: Request, identity: Identity) -> Response:
    """A run's recorded scorecard or model card, checked against its hash, served sandboxed
    (the security headers give this prefix its own CSP)."""
    p = request.path_params
    seq = reads.parse_version(p["seq"], what="run")

    def load() -> bytes:
        return reads.history_file(_model(ctx, p["name"], p["version"]), seq, p["file"])

    return Response(ctx.read(load), media_type="text/html; charset=utf-8")


def _text(form: Any, key: str, *, required: bool = False) -> str | None:
    value = form.get(key)
    text = value.strip() if isinstance(value, str) else ""
    if len(text) > MAX_TEXT:
        raise InvalidArgumentError(f"{key} is at most {MAX_TEXT} characters. Got {len(text)}.")
    if required and not text:
        raise InvalidArgumentError(f"a sign-off needs a {key}.")
    return text or None


def _number(form: Any, key: str) -> int:
    value = form.get(key)
    if not isinstance(value, str) or not value.isdigit() or len(value) > 9:
        raise InvalidArgumentError(f"the form's {key} must be a number. Got {value!r} instead.")
    return int(value)


def signoff_form(form: Any) -> signoff_rules.SignOffForm:
    """The posted form as a value (refusing anything malformed)."""
    decision = {"approve": "approval", "reject": "rejection"}.get(str(form.get("decision")))
    if decision is None:
        raise InvalidArgumentError(f"decision must be approve or reject. Got "
                                   f"{form.get('decision')!r} instead.")
    evidence, head = form.get("evidence"), form.get("head")
    for value in (evidence, head):
        if not isinstance(value, str) or len(value) > 128:
            raise InvalidArgumentError("the form's evidence or head hash is missing.")
    return signoff_rules.SignOffForm(
        decision=decision, note=_text(form, "note", required=True) or "",
        run=_number(form, "run"), evidence=str(evidence), head=str(head),
        override=_text(form, "override") if decision == "approval" else None,
        supersede=_text(form, "supersede"))


def sign_off(ctx: ServeContext, request: Request, identity: Identity, form: Any) -> Response:
    """Approve or reject, with the command line's rules; back to the version page."""
    name, version = request.path_params["name"], request.path_params["version"]
    signed = signoff_form(form)

    def write() -> None:
        model = _model(ctx, name, version)
        try:
            signoff_rules.sign_off(model, identity.user.name, signed, ctx.service)
        except signoff_rules.StaleFormError as exc:
            raise Refused(409, str(exc)) from exc
        except (signoff_rules.FourEyesError, UnauthorizedError) as exc:
            raise Refused(403, str(exc)) from exc

    ctx.read(write)
    return RedirectResponse(f"/models/{name}/{int(version)}#history", status_code=303)


def routes(ctx: ServeContext, g: Callable[..., Any]) -> list[BaseRoute]:
    """The registry's routes, each behind the guard."""
    def bind(fn: Callable[..., Response]) -> Callable[..., Response]:
        return lambda *args: fn(ctx, *args)

    return [
        Route("/models", g(bind(models_page))),
        Route("/models/{name}/{version}", g(bind(version_page))),
        Route("/models/{name}/{version}/diff", g(bind(diff_page))),
        Route("/models/{name}/{version}/signoff", g(bind(sign_off), permission="sign_off",
                                                    form=True), methods=["POST"]),
        Route(EMBED_PREFIX + "models/{name}/{version}/runs/{seq}/{file}",
              g(bind(embedded_file))),
    ]
