"""Ordinary texts without a secret that are full of strings that look like one.

The false-positive half of ``benchmarks/redaction.py``: :data:`ORDINARY_COUNT` texts, each from
its own generator (git SHAs, UUIDs, base64 fixtures, long hex hashes, minified JavaScript,
lockfile integrity hashes, placeholders and environment references, code that handles passwords,
public keys and certificates, prose about tokens). A redactor should leave every one unchanged.
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable

from benchmarks.secret_corpus import (
    ALNUM,
    B64URL,
    HEX,
    LOWER_DIGITS,
    UPPER_DIGITS,
    b64_lines,
)
from benchmarks.secret_corpus import random_chars as _chars

__all__ = ["ORDINARY_COUNT", "ordinary_texts"]

ORDINARY_COUNT = 50
"""Ordinary texts the false-positive target is judged on (issue 14: at most 1 in 50)."""

_ORDINARY: list[Callable[[random.Random], str]] = []


def _ordinary(make: Callable[[random.Random], str]) -> Callable[[random.Random], str]:
    _ORDINARY.append(make)
    return make


def _sha1(rng: random.Random) -> str:
    return _chars(rng, HEX, 40)


def _uuid(rng: random.Random) -> str:
    return "-".join(_chars(rng, HEX, n) for n in (8, 4, 4, 4, 12))


def _b64(rng: random.Random, n: int) -> str:
    return base64.b64encode(rng.randbytes(n)).decode()


@_ordinary
def _git_log(rng: random.Random) -> str:
    return "\n".join(
        f"commit {_sha1(rng)}\nAuthor: Dev {i} <dev{i}@example.com>\nDate:   Mon Jun {i + 1} "
        f"10:0{i}:00 2024 +0200\n\n    fix: handle empty token list in parser (#{100 + i})\n"
        for i in range(4)
    )


@_ordinary
def _git_show(rng: random.Random) -> str:
    return (
        f"$ git rev-parse HEAD\n{_sha1(rng)}\n$ git show --stat --oneline HEAD~1\n"
        f"{_sha1(rng)[:7]} Merge pull request #88 from team/auth-refactor\n"
        " src/auth/session.py | 12 ++++++------\n src/auth/tokens.py  |  4 ++--\n"
    )


@_ordinary
def _uuids(rng: random.Random) -> str:
    rows = [{"id": _uuid(rng), "trace_id": _uuid(rng), "status": "ok"} for _ in range(6)]
    return json.dumps(rows, indent=1)


@_ordinary
def _png_data_uri(rng: random.Random) -> str:
    return f'<img alt="logo" src="data:image/png;base64,iVBORw0KGgo{_b64(rng, 300)}">'


@_ordinary
def _base64_fixture(rng: random.Random) -> str:
    return (
        "def test_decode_roundtrip():\n"
        f'    payload = "{_b64(rng, 96)}"\n'
        "    assert encode(decode(payload)) == payload\n"
    )


@_ordinary
def _sha256sums(rng: random.Random) -> str:
    names = ["dist/app-1.4.2.tar.gz", "dist/app-1.4.2-py3-none-any.whl", "SHA256SUMS.asc"]
    return "$ sha256sum dist/*\n" + "\n".join(f"{_chars(rng, HEX, 64)}  {n}" for n in names)


@_ordinary
def _package_lock(rng: random.Random) -> str:
    entries = {
        f"node_modules/{name}": {
            "version": "4.17.21",
            "resolved": f"https://registry.npmjs.org/{name}/-/{name}-4.17.21.tgz",
            "integrity": "sha512-" + _b64(rng, 64),
        }
        for name in ("lodash", "debug", "ms")
    }
    return json.dumps({"packages": entries}, indent=2)


@_ordinary
def _yarn_lock(rng: random.Random) -> str:
    return (
        'debug@^4.3.4:\n  version "4.3.4"\n'
        f'  resolved "https://registry.yarnpkg.com/debug/-/debug-4.3.4.tgz#{_sha1(rng)}"\n'
        f"  integrity sha512-{_b64(rng, 64)}\n"
    )


@_ordinary
def _pnpm_lock(rng: random.Random) -> str:
    return (
        "packages:\n  /react@18.2.0:\n"
        f"    resolution: {{integrity: sha512-{_b64(rng, 64)}}}\n    engines: {{node: '>=0.10.0'}}"
    )


@_ordinary
def _minified_js(rng: random.Random) -> str:
    names = [_chars(rng, string.ascii_letters, 2) for _ in range(8)]
    return (
        f'!function(e,t){{"use strict";var {names[0]}="{_chars(rng, B64URL, 24)}",'
        f'{names[1]}=function(n){{return n.replace(/[^a-z0-9]/gi,"")}};'
        f'e.{names[2]}={{key:{names[0]},token:t.token||null,v:"{_sha1(rng)[:10]}"}},'
        f'e.{names[3]}=Object.assign({{}},t,{{apiBase:"/api/v2",retries:3}})}}(window,{{}});'
    )


@_ordinary
def _pip_hashes(rng: random.Random) -> str:
    return (
        "requests==2.32.3 \\\n"
        f"    --hash=sha256:{_chars(rng, HEX, 64)} \\\n"
        f"    --hash=sha256:{_chars(rng, HEX, 64)}\n"
    )


@_ordinary
def _go_sum(rng: random.Random) -> str:
    return (
        "\n".join(f"github.com/pkg/errors v0.9.{i} h1:{_b64(rng, 32)}" for i in range(3))
        + f"\ngolang.org/x/sys v0.21.0/go.mod h1:{_b64(rng, 32)}"
    )


@_ordinary
def _cargo_lock(rng: random.Random) -> str:
    return (
        '[[package]]\nname = "serde"\nversion = "1.0.203"\n'
        'source = "registry+https://github.com/rust-lang/crates.io-index"\n'
        f'checksum = "{_chars(rng, HEX, 64)}"\n'
    )


@_ordinary
def _docker_images(rng: random.Random) -> str:
    return (
        "$ docker images --digests\nREPOSITORY   TAG   DIGEST   IMAGE ID\n"
        f"python       3.11  sha256:{_chars(rng, HEX, 64)}   {_chars(rng, HEX, 12)}\n"
    )


@_ordinary
def _pytest_output(rng: random.Random) -> str:
    return (
        "tests/test_auth.py::test_token_refresh PASSED\n"
        "tests/test_auth.py::test_password_reset_email PASSED\n"
        "tests/test_auth.py::test_invalid_secret_rejected FAILED\n"
        f"=========== 1 failed, {rng.randint(20, 90)} passed in 3.21s ===========\n"
    )


@_ordinary
def _password_code(rng: random.Random) -> str:
    return (
        "def login(request):\n"
        '    password = request.POST["password"]\n'
        "    user = authenticate(username=request.POST['username'], password=password)\n"
        "    if user is None or not check_password(password, user.password_hash):\n"
        '        raise PermissionDenied("bad password")\n'
        "    token = create_token(user)\n    return JsonResponse({'token': token})\n"
    )


@_ordinary
def _settings_from_env(rng: random.Random) -> str:
    return (
        'SECRET_KEY = os.environ["DJANGO_SECRET_KEY"]\n'
        "DATABASES = {'default': {'PASSWORD': os.getenv('DB_PASSWORD'), 'HOST': 'db'}}\n"
        "API_TOKEN = settings.API_TOKEN\naws_secret = config.get('aws', 'secret')\n"
    )


@_ordinary
def _env_example(rng: random.Random) -> str:
    return (
        "# copy to .env and fill in\nDB_PASSWORD=\nAPI_KEY=your-api-key-here\n"
        "JWT_SECRET=<generate with openssl rand -hex 32>\nGITHUB_TOKEN=${GITHUB_TOKEN}\n"
        "STRIPE_SECRET_KEY=sk_live_...\nSESSION_SECRET=changeme\n"
    )


@_ordinary
def _compose_env_refs(rng: random.Random) -> str:
    return (
        "services:\n  db:\n    image: postgres:16\n    environment:\n"
        "      POSTGRES_PASSWORD: ${POSTGRES_PASSWORD}\n      POSTGRES_USER: app\n"
        "    secrets:\n      - db_password\n"
    )


@_ordinary
def _k8s_secret_refs(rng: random.Random) -> str:
    return (
        "env:\n  - name: API_TOKEN\n    valueFrom:\n      secretKeyRef:\n"
        "        name: api-credentials\n        key: token\n"
    )


@_ordinary
def _token_prose(rng: random.Random) -> str:
    return (
        f"The request used {rng.randint(1000, 9000)} prompt tokens; max_tokens: 4096, "
        "temperature 0.2. The tokenizer splits each word into tokens, and the token budget "
        "is shared by the system prompt and the tools. Set max_output_tokens=8192 to allow more."
    )


@_ordinary
def _usage_json(rng: random.Random) -> str:
    usage = {
        "id": "chatcmpl-" + _chars(rng, ALNUM, 29),
        "usage": {"prompt_tokens": rng.randint(100, 9000), "completion_tokens": 212},
        "system_fingerprint": "fp_" + _chars(rng, HEX, 10),
    }
    return json.dumps(usage)


@_ordinary
def _plain_urls(rng: random.Random) -> str:
    return (
        "Cloning into 'app'...\n$ git remote -v\norigin  git@github.com:team/app.git (fetch)\n"
        "docs: https://docs.example.com/v2/auth#tokens\n"
        "DATABASE_URL=postgresql://localhost:5432/dev\n"
        "see postgresql://user:password@localhost:5432/mydb in the README for the format\n"
        "contact: ops-team@example.com, mongodb://mongo:27017/test"
    )


@_ordinary
def _aws_docs(rng: random.Random) -> str:
    return (
        "Access key IDs begin with AKIA (long-term) or ASIA (temporary). The role "
        f"arn:aws:iam::{_chars(rng, string.digits, 12)}:role/deploy assumes "
        f"AROA{_chars(rng, UPPER_DIGITS, 17)}; user id AIDA{_chars(rng, UPPER_DIGITS, 17)}."
    )


@_ordinary
def _css(rng: random.Random) -> str:
    colors = [_chars(rng, HEX, n) for n in (6, 6, 3)]
    return (
        f".btn{{color:#{colors[0]};background:#{colors[1]};border:1px solid #{colors[2]}}}"
        ".token{font-family:monospace}"
    )


@_ordinary
def _request_logs(rng: random.Random) -> str:
    return "\n".join(
        f"2024-06-0{i} INFO request_id={_chars(rng, HEX, 32)} trace={_chars(rng, HEX, 16)} "
        f"path=/api/keys status=200 dur={rng.randint(2, 90)}ms"
        for i in range(1, 5)
    )


@_ordinary
def _notebook_image(rng: random.Random) -> str:
    output = {"output_type": "display_data", "data": {"image/png": _b64(rng, 400)}}
    return json.dumps({"cell_type": "code", "outputs": [output]})


@_ordinary
def _sql_schema(rng: random.Random) -> str:
    return (
        "CREATE TABLE users (\n  id UUID PRIMARY KEY,\n  password_hash VARCHAR(128) NOT NULL,\n"
        "  api_key_id TEXT,\n  reset_token_expires TIMESTAMP\n);\n"
        f"INSERT INTO users (id, password_hash) VALUES ('{_uuid(rng)}', "
        f"'pbkdf2_sha256$600000${_chars(rng, ALNUM, 22)}${_b64(rng, 32)}');"
    )


@_ordinary
def _react_form(rng: random.Random) -> str:
    return (
        '<input type="password" name="password" autoComplete="current-password" '
        'placeholder="Password" />\n<button onClick={() => setToken(null)}>Log out</button>'
    )


@_ordinary
def _typescript_types(rng: random.Random) -> str:
    return (
        "interface Credentials {\n  username: string;\n  password: string;\n  token?: string;\n"
        "  apiKey: string | undefined;\n}\nconst key = Object.keys(cache)[0];"
    )


@_ordinary
def _go_struct(rng: random.Random) -> str:
    return (
        "type Config struct {\n"
        '\tPassword string `json:"password" env:"DB_PASSWORD"`\n'
        '\tAPIKey   string `json:"api_key" env:"API_KEY"`\n}\n'
    )


@_ordinary
def _python_keys(rng: random.Random) -> str:
    return (
        "ranked = sorted(scores.items(), key=lambda kv: kv[1], reverse=True)\n"
        "for key, value in ranked:\n    cache[key] = value\n"
        'tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")\n'
        "monkey_key = hotkey_map.get(keycode)\n"
    )


@_ordinary
def _certificate(rng: random.Random) -> str:
    body = "\n".join(b64_lines(rng, 700))
    public = "\n".join(b64_lines(rng, 270))
    return (
        f"-----BEGIN CERTIFICATE-----\n{body}\n-----END CERTIFICATE-----\n"
        f"-----BEGIN PUBLIC KEY-----\n{public}\n-----END PUBLIC KEY-----\n"
    )


@_ordinary
def _ssh_public(rng: random.Random) -> str:
    return (
        f"$ ssh-keygen -lf ~/.ssh/id_ed25519.pub\n256 SHA256:{_b64(rng, 32)[:43]} dev@laptop\n"
        "$ cat ~/.ssh/id_ed25519.pub\n"
        f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA{_b64(rng, 32)} dev@laptop"
    )


@_ordinary
def _gpg_public(rng: random.Random) -> str:
    body = "\n".join(b64_lines(rng, 400))
    return (
        f"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n{body}\n=AbCd\n-----END PGP PUBLIC KEY BLOCK-----"
    )


@_ordinary
def _kubectl_secrets(rng: random.Random) -> str:
    return (
        "$ kubectl get secrets\nNAME                  TYPE                 DATA   AGE\n"
        "api-credentials       Opaque               2      41d\n"
        f"default-token-{_chars(rng, LOWER_DIGITS, 5)}   kubernetes.io/service-account-token   3"
    )


@_ordinary
def _terraform_plan(rng: random.Random) -> str:
    return (
        '  + resource "aws_db_instance" "main" {\n      + password = (sensitive value)\n'
        f'      + id       = "db-{_chars(rng, UPPER_DIGITS, 26)}"\n      + username = "app"\n    }}'
    )


@_ordinary
def _http_headers(rng: random.Random) -> str:
    return (
        "HTTP/1.1 200 OK\nContent-Type: application/json\n"
        f'ETag: "{_chars(rng, HEX, 32)}"\nX-Request-Id: {_uuid(rng)}\n'
        'WWW-Authenticate: Bearer realm="api"\nCache-Control: no-store'
    )


@_ordinary
def _env_listing(rng: random.Random) -> str:
    return (
        "$ env\nPATH=/usr/local/bin:/usr/bin:/bin\nHOME=/home/dev\nPWD=/home/dev/project\n"
        "OLDPWD=/home/dev\nLANG=en_US.UTF-8\nTERM=xterm-256color\nSHLVL=1\n"
        f"SSH_AUTH_SOCK=/tmp/ssh-{_chars(rng, ALNUM, 10)}/agent.1234\n"
        "PASSWORD_STORE_DIR=/home/dev/.pw"
    )


@_ordinary
def _kernel_code(rng: random.Random) -> str:
    return (
        "static int tcp_v4_rcv(struct sk_buff *skb)\n{\n\tstruct sock *sk = skb->sk;\n"
        "\tif (sk->sk_state == TCP_TIME_WAIT)\n\t\tgoto do_time_wait;\n"
        "\tsk_mem_reclaim(sk); gh_handle_irq(gh_dev);\n}\n"
        "pip install scikit-learn  # sk-learn-model-selection-utilities"
    )


@_ordinary
def _content_ids(rng: random.Random) -> str:
    return (
        f"ipfs://Qm{_chars(rng, ALNUM, 44)}\n"
        f"/nix/store/{_chars(rng, LOWER_DIGITS, 32)}-python3-3.11.7\n"
        f"oid sha256:{_chars(rng, HEX, 64)}\nsize 48213"
    )


@_ordinary
def _sha512_hex(rng: random.Random) -> str:
    digest = _chars(rng, HEX, 128)
    return f"$ openssl dgst -sha512 release.tar.gz\nSHA2-512(release.tar.gz)= {digest}"


@_ordinary
def _jwt_docs(rng: random.Random) -> str:
    return (
        "A JWT has three parts, header.payload.signature, e.g. xxxxx.yyyyy.zzzzz; send it as "
        "`Authorization: Bearer <token>` and never log the token itself."
    )


@_ordinary
def _aws_cli_output(rng: random.Random) -> str:
    account = _chars(rng, string.digits, 12)
    return json.dumps(
        {
            "UserId": "AIDA" + _chars(rng, UPPER_DIGITS, 17),
            "Account": account,
            "Arn": f"arn:aws:iam::{account}:user/ci",
        },
        indent=4,
    )


@_ordinary
def _mysql_prompt(rng: random.Random) -> str:
    return (
        "$ mkdir -p build/out && mysql -h localhost -u root -p shop\nEnter password:\n"
        "mysql> SELECT id, token_count FROM runs LIMIT 2;"
    )


@_ordinary
def _pip_download(rng: random.Random) -> str:
    return (
        "Collecting huggingface_hub>=0.23 (from transformers)\n"
        f"  Downloading huggingface_hub-0.23.4-py3-none-any.whl.metadata (12 kB)\n"
        f"  Stored in directory: /root/.cache/pip/wheels/{_chars(rng, HEX, 2)}/"
        f"{_chars(rng, HEX, 2)}/{_chars(rng, HEX, 56)}\nhf_hub_download(repo_id='gpt2')"
    )


@_ordinary
def _fonts_url(rng: random.Random) -> str:
    return (
        '<link href="https://fonts.googleapis.com/css2?family=Inter:wght@400;700&display=swap" '
        'rel="stylesheet">\n<script src="https://cdn.example.com/app.'
        f'{_chars(rng, HEX, 20)}.js" integrity="sha384-{_b64(rng, 48)}"></script>'
    )


@_ordinary
def _hexdigest_output(rng: random.Random) -> str:
    return (
        ">>> hashlib.sha256(b'hello').hexdigest()\n"
        f"'{_chars(rng, HEX, 64)}'\n>>> secrets.token_hex(16)  # generates a fresh one\n"
    )


@_ordinary
def _cache_keys(rng: random.Random) -> str:
    return (
        f"cache hit key=user:{rng.randint(1, 999)}:profile ttl=300\n"
        f"cache miss key=feed:{_chars(rng, HEX, 8)} ttl=60\n"
        "primary_key: true\nsort_key: created_at\nforeign_key: users.id"
    )


@_ordinary
def _password_policy(rng: random.Random) -> str:
    return (
        "password:\n  min_length: 12\n  require_symbols: true\n  expiry_days: 90\n"
        "token:\n  ttl: 3600\n  type: bearer\nsecret_name: prod/api/credentials"
    )


def ordinary_texts(seed: int = 14) -> list[str]:
    """:data:`ORDINARY_COUNT` texts without a secret, each from its own generator."""
    rng = random.Random(seed)
    texts = [make(rng) for make in _ORDINARY]
    assert len(texts) == ORDINARY_COUNT, f"{len(texts)} ordinary generators"
    return texts
