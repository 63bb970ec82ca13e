"""Wire codecs for the client protocols (msgspec Structs) and their error shapes."""
