"""The Knowhere-compatible REST route: bodies and OpenAPI (:mod:`.models`), the
routers and the response shape (:mod:`.route`), the Starlette routes (:mod:`.app`)."""
