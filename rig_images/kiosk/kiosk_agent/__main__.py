"""Entry point: `python3 /opt/corral/kiosk_agent` (a path) or `python3 -m kiosk_agent`."""

from __future__ import annotations

import os
import sys

if not __package__:
    # Run as a path: sys.path[0] is this folder. Import the package from its parent instead,
    # so this folder's modules are never importable as top-level names.
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from kiosk_agent.agent import main

if __name__ == "__main__":
    import channel_socket  # /opt/corral/channel_socket.py (rig_images/channel_socket.py)

    channel_socket.take()  # the channel's own socket, when corral gives one
    sys.exit(main())
