"""Server-rendered pages (placeholder until the page templates land)."""

from __future__ import annotations

from litestar import Controller
from litestar.template.config import TemplateConfig


class PageController(Controller):
    path = "/"


def template_config() -> TemplateConfig | None:  # type: ignore[type-arg]
    return None
