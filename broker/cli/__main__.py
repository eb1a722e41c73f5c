import sys

from minikafka.broker.cli.main import main

sys.exit(main())
