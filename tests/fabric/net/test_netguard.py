"""Tests of the outbound allow-list: exact origins, forbidden addresses and their IPv6 transition forms."""

from __future__ import annotations

import ipaddress

import pytest
from yarl import URL

import fabric.net.netguard as ng
from fabric.core.errors import LaneBadResponse, LaneBadURL
from fabric.net.netguard import (
    AllowList,
    HostBlocked,
    HostRule,
    RedirectHop,
    embedded_ipv4,
    parse_url,
    strip_credentials,
)

PUBLIC = AllowList.of([HostRule.from_url("https://en.wikipedia.org")])
PRIVATE = AllowList.of([HostRule.from_url("http://searxng:8080", private_ok=True)])

# Every transition form of the metadata address 169.254.169.254 (a9fe:a9fe), of loopback and of 10.0.0.5.
METADATA_FORMS = [
    "169.254.169.254",
    "::ffff:169.254.169.254",  # IPv4-mapped
    "::169.254.169.254",  # IPv4-compatible
    "2002:a9fe:a9fe::1",  # 6to4
    "64:ff9b::a9fe:a9fe",  # NAT64 well-known prefix
    "64:ff9b:1:a9fe:00a9:fe00::",  # NAT64 local-use /48 (RFC 6052 layout, "u" octet skipped)
    "2001:0:4136:e378:8000:63bf:5601:5601",  # Teredo, client = ~0x5601_5601 = 169.254.169.254
    "fd00:ec2::254",  # AWS IPv6 metadata
    "fe80::1",  # link-local
]
PRIVATE_FORMS = [
    "10.0.0.5",
    "127.0.0.1",
    "::ffff:10.0.0.5",
    "2002:7f00:1::1",  # 6to4 of 127.0.0.1
    "2002:0a00:0005::",  # 6to4 of 10.0.0.5
    "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
    "64:ff9b::a00:5",  # NAT64 of 10.0.0.5
    "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo, client 127.0.0.1
]


class TestOrigins:
    def test_rule_from_url_is_scheme_host_port(self) -> None:
        """A configured URL allows exactly its origin, with the scheme's default port when none is named."""
        assert HostRule.from_url("https://En.Wikipedia.org/w/api.php") == HostRule(
            "en.wikipedia.org", False, "https", 443
        )
        assert HostRule.from_url("http://searxng:8080", private_ok=True) == HostRule("searxng", True, "http", 8080)

    @pytest.mark.parametrize(
        "url",
        [
            "https://en.wikipedia.org:8443/x",
            "http://en.wikipedia.org/x",
            "https://evil.test/x",
            "ftp://en.wikipedia.org/",
        ],
    )
    def test_other_port_scheme_or_host_refused(self, url: str) -> None:
        """The same host on another port or scheme is another origin, refused."""
        with pytest.raises(HostBlocked):
            PUBLIC.check_url(URL(url))

    def test_listed_origin_allowed(self) -> None:
        """The exact configured origin passes."""
        assert PUBLIC.check_url(URL("https://en.wikipedia.org/w/api.php?x=1")).host == "en.wikipedia.org"

    def test_private_host_only_on_its_port(self) -> None:
        """A private service is allowed on its configured port only."""
        assert PRIVATE.check_url(URL("http://searxng:8080/search")).private_ok
        with pytest.raises(HostBlocked):
            PRIVATE.check_url(URL("http://searxng:6379/"))

    def test_bad_configured_url_is_value_error(self) -> None:
        """A URL without a host cannot become a rule."""
        with pytest.raises(ValueError, match="http"):
            HostRule.from_url("file:///etc/passwd")

    def test_public_chain_may_not_reach_private_service(self) -> None:
        """A redirect chain that started at a public origin may not end at a private one."""
        allow = AllowList.of([*PUBLIC.rules["en.wikipedia.org"], *PRIVATE.rules["searxng"]])
        first = allow.check_url(URL("https://en.wikipedia.org/"))
        with pytest.raises(HostBlocked, match="private service"):
            allow.check_redirect(first, allow.check_url(URL("http://searxng:8080/")))
        allow.check_redirect(allow.check_url(URL("http://searxng:8080/")), first)  # private → public is fine


class TestAddresses:
    @pytest.mark.parametrize("address", METADATA_FORMS)
    def test_metadata_and_link_local_refused_even_for_private_hosts(self, address: str) -> None:
        """Metadata/link-local addresses, in every IPv6 transition form, are refused whatever the rule."""
        rule = PRIVATE.rule_for("searxng", port=8080)
        with pytest.raises(HostBlocked, match="forbidden"):
            PRIVATE.check_address(rule, ipaddress.ip_address(address))

    @pytest.mark.parametrize("address", PRIVATE_FORMS)
    def test_private_forms_refused_for_public_hosts(self, address: str) -> None:
        """Private and loopback addresses, in every transition form, are refused for a public lane."""
        rule = PUBLIC.rule_for("en.wikipedia.org", scheme="https", port=443)
        with pytest.raises(HostBlocked):
            PUBLIC.check_address(rule, ipaddress.ip_address(address))

    @pytest.mark.parametrize("address", PRIVATE_FORMS)
    def test_private_forms_allowed_for_private_hosts(self, address: str) -> None:
        """A self-hosted service may resolve to private and loopback addresses."""
        PRIVATE.check_address(PRIVATE.rule_for("searxng", port=8080), ipaddress.ip_address(address))

    @pytest.mark.parametrize("address", ["93.184.216.34", "2606:2800:220:1::1", "2002:5db8:d822::1"])
    def test_public_addresses_allowed_for_public_hosts(self, address: str) -> None:
        """Public addresses (6to4 of a public IPv4 included) pass."""
        PUBLIC.check_address(PUBLIC.rule_for("en.wikipedia.org", port=443), ipaddress.ip_address(address))

    def test_ip_literal_url_judged_by_address(self) -> None:
        """An IP literal listed verbatim is still judged by the address rules (6to4 metadata refused)."""
        allow = AllowList.of([HostRule.from_url("http://[2002:a9fe:a9fe::1]:80", private_ok=True)])
        with pytest.raises(HostBlocked, match="forbidden"):
            allow.check_url(URL("http://[2002:a9fe:a9fe::1]/latest/meta-data"))

    def test_embedded_forms_decoded(self) -> None:
        """The decoder finds the IPv4 address in each transition form."""
        meta = ipaddress.IPv4Address("169.254.169.254")
        for form in METADATA_FORMS[1:7]:
            assert meta in embedded_ipv4(ipaddress.IPv6Address(form)), form


class TestRedirectHop:
    def test_cross_origin_drops_credentials(self) -> None:
        """Another origin loses Authorization, cookies and keys under any header name; negotiation headers stay."""
        hop = RedirectHop("GET", URL("https://a.test/x"), {"q": "1"}, None, {
            "Authorization": "Bearer k", "X-Api-Key": "k", "Cookie": "s=1", "X-Auth-Token": "t", "Accept": "json",
            "X-Client": "c", "If-None-Match": '"e"', "User-Agent": "ua",
        })  # fmt: skip
        hop.follow(302, "https://b.test/y")
        assert hop.headers == {"Accept": "json", "If-None-Match": '"e"', "User-Agent": "ua"}
        assert (str(hop.target), hop.params) == ("https://b.test/y", None)

    def test_same_origin_keeps_credentials(self) -> None:
        """A relative redirect on the same origin keeps the key."""
        hop = RedirectHop("GET", URL("https://a.test/x"), None, None, {"Authorization": "Bearer k"})
        hop.follow(307, "/other")
        assert hop.headers == {"Authorization": "Bearer k"}
        assert str(hop.target) == "https://a.test/other"

    def test_other_port_is_another_origin(self) -> None:
        """Same host, another port: credentials dropped."""
        hop = RedirectHop("GET", URL("http://a.test:8080/x"), None, None, {"Authorization": "Bearer k"})
        hop.follow(302, "http://a.test:9090/x")
        assert hop.headers == {}

    @pytest.mark.parametrize("status", [307, 308])
    def test_body_never_reposted_to_another_origin(self, status: int) -> None:
        """A 307/308 of a POST to another origin is refused."""
        hop = RedirectHop("POST", URL("http://a.test/x"), None, {"q": "secret"}, None)
        with pytest.raises(LaneBadResponse, match="re-send"):
            hop.follow(status, "http://169.254.169.254/")

    @pytest.mark.parametrize("status", [301, 302, 303])
    def test_post_becomes_get_without_body(self, status: int) -> None:
        """303, and 301/302 after a POST, continue as GET without the body."""
        hop = RedirectHop("POST", URL("http://a.test/x"), None, {"q": "secret"}, None)
        hop.follow(status, "http://b.test/y")
        assert (hop.method, hop.json_body) == ("GET", None)

    def test_same_origin_307_keeps_body(self) -> None:
        """A 307 on the same origin re-sends the body (its meaning)."""
        hop = RedirectHop("POST", URL("http://a.test/x"), None, {"q": 1}, None)
        hop.follow(307, "/y")
        assert (hop.method, hop.json_body) == ("POST", {"q": 1})

    @pytest.mark.parametrize("location", ["http://[::1", "http://a.test:99999/", "gopher://a.test/", "http://:80/"])
    def test_bad_location_is_typed(self, location: str) -> None:
        """A Location the parser rejects (or not http(s) with a host) is LaneBadURL."""
        hop = RedirectHop("GET", URL("http://a.test/x"), None, None, None)
        with pytest.raises(LaneBadURL):
            hop.follow(302, location)

    def test_parse_url_bad_input_is_typed(self) -> None:
        """A configured URL the parser rejects is LaneBadURL naming the lane."""
        with pytest.raises(LaneBadURL) as err:
            parse_url("http://[zz", None, "web", "searxng")
        assert (err.value.lane, err.value.provider) == ("web", "searxng")

    def test_strip_none(self) -> None:
        """No headers stay no headers."""
        assert strip_credentials(None) is None


def test_public_api() -> None:
    """The module exports exactly its documented names."""
    assert set(ng.__all__) == {
        "METADATA_ADDRESSES", "AllowList", "GuardedResolver", "HostBlocked", "HostRule", "IPAddress",
        "RedirectHop", "StaticResolver", "embedded_ipv4", "origin_of", "parse_ip", "parse_url", "strip_credentials",
    }  # fmt: skip
