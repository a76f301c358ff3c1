"""The feature store pages: feature groups, feature views and their training datasets."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from fstrain.kernel.names import check_entity_name
from fstrain.serve import reads
from fstrain.serve.access import Identity

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fstrain.serve.context import ServeContext


def _ref(request: Request, what: str) -> tuple[str, int]:
    name = check_entity_name(request.path_params["name"], what)
    return name, reads.parse_version(request.path_params["version"])


def groups_page(ctx: ServeContext, request: Request, identity: Identity) -> Response:
    """Every feature group version."""
    rows = ctx.read(lambda: reads.feature_group_rows(ctx.project.get_feature_store()))
    return ctx.render(request, "feature_groups.html", {"rows": rows}, identity=identity)


def group_page(ctx: ServeContext, request: Request, identity: Identity) -> Response:
    """One feature group: schema, commits, statistics."""
    name, version = _ref(request, "feature group")
    page = ctx.read(lambda: reads.feature_group_page(
        ctx.project.get_feature_store().get_feature_group(name, version)))
    return ctx.render(request, "feature_group.html", {"g": page}, identity=identity)


def views_page(ctx: ServeContext, request: Request, identity: Identity) -> Response:
    """Every feature view version and its training datasets."""
    rows = ctx.read(lambda: reads.feature_view_rows(ctx.project.get_feature_store()))
    return ctx.render(request, "feature_views.html", {"rows": rows}, identity=identity)


def view_page(ctx: ServeContext, request: Request, identity: Identity) -> Response:
    """One feature view: features, labels, helper columns, query, training datasets."""
    name, version = _ref(request, "feature view")
    page = ctx.read(lambda: reads.feature_view_page(
        ctx.project.get_feature_store().get_feature_view(name, version)))
    return ctx.render(request, "feature_view.html", {"v": page}, identity=identity)


def td_page(ctx: ServeContext, request: Request, identity: Identity) -> Response:
    """One training-dataset version: splits, sizes, hashes, commits, models."""
    name, version = _ref(request, "feature view")
    td_version = reads.parse_version(request.path_params["td"], what="training-dataset version")

    def load() -> dict[str, Any]:
        fv = ctx.project.get_feature_store().get_feature_view(name, version)
        models = _all_models(ctx.project.get_model_registry())
        return reads.training_dataset_page(fv, td_version, models)

    return ctx.render(request, "training_dataset.html", {"t": ctx.read(load)},
                      identity=identity)


def _all_models(registry: Any) -> list[Any]:
    listing = getattr(registry, "list_models", None)
    return list(listing()) if callable(listing) else []


def routes(ctx: ServeContext, g: Callable[..., Any]) -> list[BaseRoute]:
    """The feature store's routes, each behind the guard."""
    def bind(fn: Callable[..., Response]) -> Callable[..., Response]:
        return lambda *args: fn(ctx, *args)

    return [
        Route("/feature-groups", g(bind(groups_page))),
        Route("/feature-groups/{name}/{version}", g(bind(group_page))),
        Route("/feature-views", g(bind(views_page))),
        Route("/feature-views/{name}/{version}", g(bind(view_page))),
        Route("/feature-views/{name}/{version}/training-datasets/{td}", g(bind(td_page))),
    ]
