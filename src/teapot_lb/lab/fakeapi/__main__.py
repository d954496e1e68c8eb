import asyncio

from .server import _main

asyncio.run(_main())
