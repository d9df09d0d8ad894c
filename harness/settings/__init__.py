"""What a run is asked to do: the option table (``options``), the suite config file
(``config_file``) and the resolution of both into run options (``resolve``)."""
