"""The ground floor: the data model and what every other floor shares.

Models, the request and answer, the vocabulary, errors, tenants' paths, the chunk and store-writer contract,
route strategies, logging, threads and safe JSON. Imports nothing else of the fabric, the lanes or fusion.
"""
