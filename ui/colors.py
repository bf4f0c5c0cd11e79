"""Stable colours by op name: the same name has the same colour at every zoom, in every run, on
every page, in Python (here) and in the trace viewer's JavaScript (ui/assets/trace_viewer*.js).

The rule, to be implemented identically in both languages (IEEE doubles, same operation order):

    h = FNV-1a 32-bit hash of the name's UTF-8 bytes:
        h = 2166136261
        for each byte b:  h = ((h XOR b) * 16777619) mod 2^32
    hue H        = h mod 360                      (degrees, integer)
    saturation S = 55 + ((h >> 9) mod 16)         (percent, integer 55..70)
    lightness L  = 45 + ((h >> 13) mod 16)        (percent, integer 45..60)
    HSL -> RGB:
        s = S / 100;  l = L / 100
        c = (1 - |2 * l - 1|) * s
        x = c * (1 - |((H / 60) mod 2) - 1|)
        m = l - c / 2
        (r, g, b) = (c, x, 0) if H < 60,  (x, c, 0) if H < 120, (0, c, x) if H < 180,
                    (0, x, c) if H < 240, (x, 0, c) if H < 300, (c, 0, x) otherwise
        each channel = floor((channel + m) * 255 + 0.5), written as two lower-case hex digits
    colour = "#rrggbb"

Step markers are not hashed: they are drawn in STEP_MARKER_COLOR, a neutral grey.
"""

from __future__ import annotations

import math

STEP_MARKER_COLOR = "#9e9e9e"

_FNV_OFFSET = 2166136261
_FNV_PRIME = 16777619


def fnv1a_32(data: bytes) -> int:
    """The FNV-1a 32-bit hash of `data`."""
    h = _FNV_OFFSET
    for b in data:
        h = ((h ^ b) * _FNV_PRIME) & 0xFFFFFFFF
    return h


def hsl_of(name: str) -> tuple[int, int, int]:
    """(hue in degrees, saturation %, lightness %) of an op name, from its FNV-1a hash."""
    h = fnv1a_32(name.encode("utf-8"))
    return h % 360, 55 + ((h >> 9) % 16), 45 + ((h >> 13) % 16)


def hsl_to_hex(hue: int, sat_pct: int, light_pct: int) -> str:
    """'#rrggbb' of an HSL colour, by the formula in the module's docstring."""
    s = sat_pct / 100
    l = light_pct / 100  # noqa: E741 - the formula's name
    c = (1 - abs(2 * l - 1)) * s
    x = c * (1 - abs(((hue / 60) % 2) - 1))
    m = l - c / 2
    if hue < 60:
        r, g, b = c, x, 0.0
    elif hue < 120:
        r, g, b = x, c, 0.0
    elif hue < 180:
        r, g, b = 0.0, c, x
    elif hue < 240:
        r, g, b = 0.0, x, c
    elif hue < 300:
        r, g, b = x, 0.0, c
    else:
        r, g, b = c, 0.0, x
    return "#" + "".join(f"{math.floor((v + m) * 255 + 0.5):02x}" for v in (r, g, b))


def op_color(name: str) -> str:
    """The stable colour of an op name, '#rrggbb' (see the module docstring for the rule)."""
    return hsl_to_hex(*hsl_of(name))
