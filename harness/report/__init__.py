"""Renderers of finished records: the terminal summary, summary.md, JUnit, GitHub annotations and HTML.

They compute nothing new: every number they show is in the records."""
