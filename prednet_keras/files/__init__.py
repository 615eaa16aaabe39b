"""Files written whole, fetched and checked, drawn; and what long work on them prints. No framework at import.

Reached module by module (this face imports nothing): diskwrite (files replaced atomically through a
temporary file, the room on a disk checked before a write), downloads (a file fetched from the web into
Keras' cache folder, resumed where a broken transfer stopped, whole or not at all; the one place the
network is reached), records (what arrived there, its checksum in that folder's checksums.json, checked on
every use), figures (a chart written as a PNG, no pyplot), progress (what long work prints on any output:
a download's bytes, the words every display shares), small_text (a small text file the user names, a study's
spec or a confirmatory plan, read whole or refused unread).
"""
