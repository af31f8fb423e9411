"""Tests of the real parts together: Ray (one shared cluster per session), the model, a browser, the CLI's runs."""
