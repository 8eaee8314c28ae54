"""What every report page must be, checked the same way for the toy study and for a real one:
self-contained (images inlined as PNG, nothing fetched from a server or a file)."""

from __future__ import annotations

import base64
import re

PNG = b"\x89PNG\r\n\x1a\n"


def images(text: str) -> list[bytes]:
    """The page's inlined images, decoded."""
    return [base64.b64decode(b) for b in re.findall(r'src="data:image/png;base64,([^"]+)"', text)]


def assert_self_contained(text: str, min_images: int = 2) -> None:
    """At least ``min_images`` inlined PNGs, and no reference to anything outside the page."""
    found = images(text)
    assert len(found) >= min_images and all(img.startswith(PNG) for img in found)
    srcs = re.findall(r'(?:src|href)="([^"]*)"', text)
    assert srcs and all(s.startswith("data:image/png;base64,") for s in srcs)
    assert 'src="http' not in text and 'src="file' not in text and "<link" not in text
