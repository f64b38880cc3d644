"""A loopback JWKS endpoint for the benchmarks: makes an RSA key, writes an RS256 login token
(PyJWT) to the file named by argv[2], serves the public key at /jwks.json on port argv[1]
until killed."""
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

port, token_file = int(sys.argv[1]), sys.argv[2]
issuer = f"http://127.0.0.1:{port}"
key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
jwk.update({"kid": "bench", "use": "sig", "alg": "RS256"})
body = json.dumps({"keys": [jwk]}).encode()
now = int(time.time())
claims = {"iss": issuer, "aud": "bench-app", "sub": "bench-user", "iat": now, "exp": now + 3600}
with open(token_file, "w") as f:
    f.write(jwt.encode(claims, key, algorithm="RS256", headers={"kid": "bench"}))


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
