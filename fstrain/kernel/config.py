"""The base of every pipeline's config: unknown options are refused, and any invalid option
raises :class:`fstrain.kernel.errors.ConfigError` (fstrain's one exception hierarchy), not
pydantic's ``ValidationError``, whether the config comes from Python, the CLI or YAML."""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict, ValidationError

from fstrain.kernel.errors import ConfigError, did_you_mean


class PipelineConfig(BaseModel):
    """A strict pydantic model whose validation errors are :class:`ConfigError`."""

    model_config = ConfigDict(extra="forbid")

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise ConfigError(validation_message(exc, type(self).model_fields)) from None

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> Self:  # noqa: D102
        try:
            return super().model_validate(obj, *args, **kwargs)
        except ValidationError as exc:
            # pydantic runs the overridden __init__ on a mapping: its ConfigError comes back
            # wrapped as a value error of the whole input; raise it as it was
            errors = exc.errors()
            inner = errors[0].get("ctx", {}).get("error") if len(errors) == 1 else None
            if isinstance(inner, ConfigError):
                raise inner from None
            raise ConfigError(validation_message(exc, cls.model_fields)) from None


def validation_message(exc: ValidationError, fields: Any = (), *, title: bool = True) -> str:
    """One clause per invalid option: its name, what is wrong, and the value given (prefixed
    with the model's name unless ``title=False``)."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        if err["type"] == "missing":
            parts.append(f"missing field '{where}'")
        elif err["type"] == "extra_forbidden":
            name = str(err["loc"][-1])
            hint = did_you_mean(name, list(fields)) if len(err["loc"]) == 1 else ""
            parts.append(f"unknown field '{where}'.{hint}".rstrip("."))
        elif not err["loc"]:  # a check across options: its message names them
            parts.append(str(err["msg"]).removeprefix("Value error, "))
        else:
            msg = str(err["msg"]).removeprefix("Value error, ")
            parts.append(f"option '{where}': {msg}; got {err.get('input')!r}")
    return (f"{exc.title}: " if title else "") + "; ".join(parts)
