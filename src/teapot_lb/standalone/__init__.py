"""Standalone mode: the controller and the speaker of one node, fed by YAML manifests.

- :mod:`.inotify` (pure) — inotify's records parsed, and what each means for the
  manifests; :mod:`.watch` — the inotify instance on the event loop (`ctypes`, no
  dependency), which wakes the reader of the directory;
- :mod:`.directory` — which files, their fingerprint (compared when the watch wakes, on a
  slow safety re-check, or polled where inotify is unavailable), reading them into a
  :class:`~.directory.Snapshot` (objects + problems; unchanged files are not parsed
  again, a file that stops reading keeps its last good content);
- :mod:`.assign` (pure) — every Service's IPs from the controller core, computed the same
  way on every node from the same manifests (nodes agree without talking);
- :mod:`.runner` — :class:`~.runner.ManifestSource` (directory → Store, with assigned
  statuses) and :class:`~.runner.StatusWriter` (`status.json`, `events.log`).

`teapot-lb run` (:mod:`teapot_lb.cli.run`) wires them to a
:class:`~teapot_lb.speaker.node.NodeSpeaker`.
"""
