"""The HTTP layer every face shares: JSON replies, keys and errors (web), the request
declarations that are also the OpenAPI schema, each TCP connection, the access log.

May import ``serve.play`` and what is below it; never a face.
"""
