"""Developer tools outside the runtime package: plotting and the REST
example renderer."""
