"""``redraft compare``: critic strategies against each other and against sampling, at matched compute."""
