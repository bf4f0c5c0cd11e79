"""Exporters: runs from the store written in other tools' formats (Perfetto, XProf XSpace)."""
