"""A trained policy behind an HTTP JSON endpoint on Ray Serve (``rlstack serve``).

    from rlstack.serve import start_server, stop_server

    url = start_server("path/to/checkpoint", port=8000)   # returns once replicas answer
    # POST {"obs": [0.0, 0.1, 0.0, -0.1]} to url -> {"actions": 1}
    stop_server()

``server.py`` starts and stops the endpoint, ``deployment.py`` is the Serve deployment
(restoring the trainer, batching requests), ``codec.py`` reads request bodies and writes
answers. Importing this package imports neither Ray nor a deep-learning framework.
"""

from rlstack.serve.server import APP_NAME, ServeError, serve_forever, start_server, stop_server

__all__ = ["APP_NAME", "ServeError", "serve_forever", "start_server", "stop_server"]
