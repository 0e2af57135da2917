import sys
import pickle

code = sys.stdin.read()
exec(code)
state = pickle.loads(sys.stdin.buffer.read())
