"""The DIDComm peer of couchlink's agent in tests, played by an independent implementation:
SICPA's didcomm-python with peerdid-python (tests/agent/requirements.txt).

    counterpart.py new-identity ENDPOINT          -> {"did", "secrets"}
    counterpart.py pack MODE FROM_JSON TO_DID     (message on stdin) -> packed envelope
    counterpart.py unpack FROM_JSON               (envelope on stdin) -> {"message", "metadata"}

MODE is authcrypt, anoncrypt or signed. FROM_JSON is an identity from new-identity. Each call
is a process of its own: the test drives it like a wallet would, one message at a time.
"""
import asyncio
import json
import sys
import warnings

# authlib warns on import that its JOSE module is deprecated: noise in every test's output.
warnings.filterwarnings("ignore")

from didcomm.common.resolvers import ResolversConfig
from didcomm.did_doc.did_doc import DIDDoc
from didcomm.did_doc.did_resolver import DIDResolver
from didcomm.message import Message
from didcomm.pack_encrypted import PackEncryptedConfig, pack_encrypted
from didcomm.pack_signed import pack_signed
from didcomm.secrets.secrets_resolver_in_memory import SecretsResolverInMemory
from didcomm.secrets.secrets_util import generate_ed25519_keys_as_jwk_dict, generate_x25519_keys_as_jwk_dict, jwk_to_secret
from didcomm.common.algorithms import AnonCryptAlg
from didcomm.unpack import unpack
from peerdid.dids import create_peer_did_numalgo_2, resolve_peer_did
from peerdid.keys import Ed25519VerificationKey, X25519KeyAgreementKey


class PeerDIDResolver(DIDResolver):
    """did:peer:2 resolved offline, with absolute key IDs (didcomm-python looks keys up by them)."""

    async def resolve(self, did):
        doc = resolve_peer_did(did).serialize()
        for vm in doc["verificationMethod"]:
            if vm["id"].startswith("#"):
                vm["id"] = did + vm["id"]
        for rel in ("authentication", "keyAgreement", "assertionMethod", "capabilityInvocation", "capabilityDelegation"):
            doc[rel] = [k if not k.startswith("#") else did + k for k in doc.get(rel, [])]
        for service in doc.get("service", []):
            if service["id"].startswith("#"):
                service["id"] = did + service["id"]
            # didcomm-python 0.3.2 reads `accept` and `routingKeys` beside a string endpoint
            # (DIDComm v2.0's shape), not inside an object one (v2.1's).
            endpoint = service.get("serviceEndpoint")
            if isinstance(endpoint, dict):
                service["serviceEndpoint"] = endpoint["uri"]
                service["accept"] = endpoint.get("accept", endpoint.get("a", ["didcomm/v2"]))
                service["routingKeys"] = endpoint.get("routingKeys", endpoint.get("r", []))
        return DIDDoc.deserialize(doc)


def new_identity(endpoint):
    x_private, x_public = generate_x25519_keys_as_jwk_dict()
    e_private, e_public = generate_ed25519_keys_as_jwk_dict()
    did = create_peer_did_numalgo_2(
        [X25519KeyAgreementKey.from_jwk(x_public)],
        [Ed25519VerificationKey.from_jwk(e_public)],
        {"type": "DIDCommMessaging", "serviceEndpoint": {"uri": endpoint, "accept": ["didcomm/v2"]}},
    )
    doc = asyncio.run(PeerDIDResolver().resolve(did))
    x_kid = doc.key_agreement[0]
    e_kid = doc.authentication[0]
    x_private["kid"], e_private["kid"] = x_kid, e_kid
    return {"did": did, "secrets": [x_private, e_private]}


def resolvers(identity):
    secrets = [jwk_to_secret(jwk) for jwk in identity["secrets"]] if identity else []
    return ResolversConfig(secrets_resolver=SecretsResolverInMemory(secrets), did_resolver=PeerDIDResolver())


async def pack(mode, identity, to):
    message = Message.from_dict(json.loads(sys.stdin.read()))
    config = resolvers(identity)
    if mode == "signed":
        return (await pack_signed(config, message, identity["did"])).packed_msg
    sender = identity["did"] if mode == "authcrypt" else None
    options = PackEncryptedConfig(enc_alg_anon=AnonCryptAlg.A256CBC_HS512_ECDH_ES_A256KW, forward=False)
    return (await pack_encrypted(config, message, to=to, frm=sender, pack_config=options)).packed_msg


async def unpack_message(identity):
    result = await unpack(resolvers(identity), sys.stdin.read())
    m = result.message
    meta = result.metadata
    return json.dumps({
        "message": m.as_dict(),
        "metadata": {"encrypted": meta.encrypted, "authenticated": meta.authenticated, "anonymous_sender": meta.anonymous_sender, "encrypted_from": meta.encrypted_from},
    })


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    if command == "new-identity":
        print(json.dumps(new_identity(args[0])))
    elif command == "pack":
        identity = json.loads(args[1]) if args[1] != "-" else None
        print(asyncio.run(pack(args[0], identity, args[2])))
    elif command == "unpack":
        print(asyncio.run(unpack_message(json.loads(args[0]))))
    else:
        sys.exit(f"unknown command {command}")
