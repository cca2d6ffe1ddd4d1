"""The HTTP edge: Litestar app, controllers, pages. Services own the logic."""
