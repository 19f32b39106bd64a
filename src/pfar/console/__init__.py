"""The web console: the owner's page onto a running kernel (docs/console.md).

Served by the kernel on its own port (`serve`), it is a thin shell over the operator
API like the CLI and the chat channels: `app` holds its routes, `pages` its pages and
forms, `live` the server-sent events it updates them by, `http_api` the operator API
over HTTP, `auth` the owner token, sessions and CSRF, and `bodies` bounded requests.
"""
