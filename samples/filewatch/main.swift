// filewatch: placeholder until the file watch factory lands.
import SampleSupport
printError("filewatch: not yet implemented")
