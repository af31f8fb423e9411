"""Tests that start no Ray, load no model and open no browser, laid out like the ``redraft`` package."""
