"""Loading files into the store: finding them (``discovery``), reading and checking their bytes
in worker processes (``workers``, ``prepare``, ``checks``), sniffing each one's format (the
registry, ``analyzer.formats``), loading it in a transaction alone or with others in a batch
(``flow``, ``batch``, ``staged``), and reporting what became of every file (``reports``).
"""
