"""An artifact's I/O protocol: one typed description (``model``), inferred from the file
(``infer``), overridden by a ``--io-protocol`` file, ``[protocol]`` in a config or ``--map``
(``overrides``), and applied on every call (``adapt``); failures it explains (``explain``)."""
