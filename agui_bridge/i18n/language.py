"""Language selection and the message catalogue of every user-facing text (docs/design.md#language-selection).

The language is always request-local: callers pass it explicitly, nothing here keeps global state
except the immutable catalogue. The texts are package data, one JSON file per language in
`agui_bridge/i18n/catalog/`, keyed by the `MessageKey` constants. English is the source language; every
key has a real translation in every supported language (a unit test enforces it, placeholders
included).
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Mapping
from importlib import resources
from types import MappingProxyType
from typing import Final

from agui_bridge.i18n.message_keys import MessageKey

__all__ = [
    "FALLBACK_KEY",
    "IDENTICAL_TO_ENGLISH_ALLOWED",
    "SUPPORTED",
    "MessageKey",
    "language_from_accept",
    "normalise_language",
    "process_default_language",
    "select_language",
    "translate",
]

SUPPORTED: Final = ("en", "zh", "ja", "es", "fr", "de", "pt")
SOURCE_LANGUAGE: Final = "en"
#: Shown (localised) instead of an unknown catalogue key at runtime.
FALLBACK_KEY: Final = MessageKey.INTERNAL_ERROR

_LOCALE_VARIABLES: Final = ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG")


# --------------------------------------------------------------------------------------------
# Language selection


def normalise_language(tag: object) -> str | None:
    """``"zh-CN"`` -> ``"zh"``, ``" EN_us "`` -> ``"en"``; unsupported or non-string -> None."""
    if not isinstance(tag, str):
        return None
    primary = tag.strip().lower().replace("_", "-").split("-", 1)[0]
    return primary if primary in SUPPORTED else None


def process_default_language(environ: Mapping[str, str]) -> str:
    """First of LANGUAGE, LC_ALL, LC_MESSAGES, LANG that names a supported language, else ``en``.

    A value is cut at ``_`` and ``.`` (``de_DE.UTF-8`` -> ``de``); we also cut at ``@`` and take the
    first entry of a GNU ``LANGUAGE`` list (``fr:en`` -> ``fr``), which the reference did not, so
    that ordinary locale settings are honoured.
    """
    for name in _LOCALE_VARIABLES:
        value = environ.get(name)
        if not value:
            continue
        first = value.split(":", 1)[0]
        language = normalise_language(re.split(r"[_.@]", first, maxsplit=1)[0])
        if language is not None:
            return language
    return SOURCE_LANGUAGE


def _weight(params: list[str]) -> float:
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            try:
                return float(value.strip())
            except ValueError:
                return 0.0
    return 1.0


def language_from_accept(header: str | None, default: str) -> str:
    """Pick the best supported language of an ``Accept-Language`` header.

    Highest q wins, ties go to the earliest item; q <= 0, q > 1, non-finite q and unsupported tags
    are dropped; ``*`` stands for ``default``. Nothing usable -> ``default``.
    """
    fallback = normalise_language(default) or SOURCE_LANGUAGE
    if not header:
        return fallback
    best: str | None = None
    best_weight = 0.0
    for item in header.split(","):
        tag, *params = item.split(";")
        tag = tag.strip()
        if not tag:
            continue
        weight = _weight(params)
        if not math.isfinite(weight) or weight <= 0.0 or weight > 1.0:
            continue
        language = fallback if tag == "*" else normalise_language(tag)
        if language is not None and weight > best_weight:
            best, best_weight = language, weight
    return best or fallback


def select_language(accept_language: str | None, preferred_language: object, default: str) -> str:
    """``preferredLanguage`` (if supported) > ``Accept-Language`` > process default."""
    preferred = normalise_language(preferred_language)
    if preferred is not None:
        return preferred
    return language_from_accept(accept_language, default)


# --------------------------------------------------------------------------------------------
# Catalogue: one JSON file per language (package data), key -> text in str.format syntax.

#: Texts that are genuinely the same in English and another language (none today).
IDENTICAL_TO_ENGLISH_ALLOWED: Final[frozenset[tuple[str, str]]] = frozenset()

_log = logging.getLogger(__name__)


def _load(language: str) -> Mapping[str, str]:
    text = resources.files("agui_bridge.i18n").joinpath("catalog", f"{language}.json").read_text(encoding="utf-8")
    entries = json.loads(text)
    if not isinstance(entries, dict) or not all(isinstance(v, str) for v in entries.values()):
        raise ValueError(f"agui_bridge/i18n/catalog/{language}.json must be an object of strings")
    return MappingProxyType(entries)


#: language -> key -> template, read once at import.
_CATALOGS: Final[Mapping[str, Mapping[str, str]]] = MappingProxyType({lang: _load(lang) for lang in SUPPORTED})


class _KeepMissing(dict[str, str]):
    """``format_map`` helper: an absent placeholder stays visible instead of raising."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def translate(key: str, language: str, **params: str) -> str:
    """Localised text of ``key`` with ``params`` filled in; unsupported language -> English.

    A key missing from a language falls back to English; an unknown key yields the localised
    "internal error" text (and an error log naming the key), so that a programming error never becomes
    a 500 (docs/design.md#decision-no-500).
    """
    english = _CATALOGS[SOURCE_LANGUAGE]
    catalog = _CATALOGS[normalise_language(language) or SOURCE_LANGUAGE]
    template = catalog.get(key) or english.get(key)
    if template is None:
        _log.error("unknown message key %r", key)
        template = catalog.get(FALLBACK_KEY) or english[FALLBACK_KEY]
    return template.format_map(_KeepMissing(params))
