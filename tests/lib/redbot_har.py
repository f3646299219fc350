"""REDbot's command line (redbot.cli) with request headers added, which the
CLI cannot send: `redbot_har.py [-o FORMAT] [-X METHOD] [-d BODY] URL
[NAME: VALUE]...` prints REDbot's output (FORMAT as the CLI's -o, default
har: the notes are in `_red_messages`) for a request of URL (GET unless
METHOD) with those headers (and that body). tests/lib/RedBot.py uses it for the conditional request that must
be answered 304; every other URL goes through the `redbot` CLI itself."""

import sys
from argparse import ArgumentParser
from configparser import ConfigParser

import thor
from redbot.formatter import find_formatter
from redbot.resource import HttpResource


def main():
    parser = ArgumentParser()
    parser.add_argument("-o", dest="output_format", default="har")
    parser.add_argument("-X", dest="method", default="GET")
    parser.add_argument("-d", dest="body", default="")
    parser.add_argument("url")
    parser.add_argument("headers", nargs="*", help="NAME: VALUE")
    args = parser.parse_args()
    headers = [tuple(h.strip() for h in arg.split(":", 1)) for arg in args.headers]
    config = ConfigParser()
    config.read_dict({"redbot": {"enable_local_access": "True"}})
    config = config["redbot"]
    resource = HttpResource(config)
    resource.set_request(args.url, args.method, headers, args.body.encode())
    formatter = find_formatter(args.output_format, "har", False)(config, resource, sys.stdout.write, {"tty_out": False})
    formatter.bind_resource(resource)

    @thor.events.on(formatter)
    def formatter_done():
        thor.stop()

    resource.check()
    thor.run()


if __name__ == "__main__":
    main()
