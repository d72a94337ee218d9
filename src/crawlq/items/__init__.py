"""Items a spider yields; `crawlq.items.schema` reads the fields of a declared item class."""
