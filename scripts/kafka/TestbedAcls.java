// Sets up the test bed's principals on a cluster with an authorizer: SCRAM credentials (upserted,
// so a test bed formatted before a user existed gets it too) and ACL bindings (creating an
// existing binding is a no-op). Run by scripts/testbed after a start, as a super user (PLAINTEXT,
// which the test bed's brokers map to User:ANONYMOUS, a super user).
//
// Usage: TestbedAcls BOOTSTRAP SPEC_FILE
//   SPEC_FILE lines (blank lines and lines starting with '#' are ignored):
//     scram MECHANISM USER PASSWORD
//     acl PRINCIPAL RESOURCE_TYPE PATTERN_TYPE NAME OPERATION[,OPERATION...] ALLOW|DENY
//   e.g. `acl User:mirror TOPIC PREFIXED acl- READ,DESCRIBE ALLOW`. The host is always '*'.
// Exits 0 once every credential and binding is in place, 1 (with the reason on stderr) otherwise.

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialAlteration;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;

public final class TestbedAcls {
    private static final long TIMEOUT_MS = 30_000;

    private TestbedAcls() {}

    public static void main(String[] args) throws InterruptedException {
        if (args.length != 2) {
            System.err.println("usage: TestbedAcls BOOTSTRAP SPEC_FILE");
            System.exit(2);
        }
        List<UserScramCredentialAlteration> scram = new ArrayList<>();
        List<AclBinding> acls = new ArrayList<>();
        try {
            parse(Files.readAllLines(Path.of(args[1])), scram, acls);
        } catch (IOException | IllegalArgumentException e) {
            System.err.println("TestbedAcls: " + args[1] + ": " + e.getMessage());
            System.exit(2);
        }
        Properties props = new Properties();
        props.setProperty(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.setProperty(AdminClientConfig.CLIENT_ID_CONFIG, "strait-testbed-acls");
        props.setProperty(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, Long.toString(TIMEOUT_MS));
        try (Admin admin = Admin.create(props)) {
            // One request per credential: a request may alter each user only once.
            for (UserScramCredentialAlteration one : scram) {
                admin.alterUserScramCredentials(List.of(one)).all().get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
            }
            if (!acls.isEmpty()) {
                admin.createAcls(acls).all().get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
            }
            admin.close(Duration.ofSeconds(2));
        } catch (ExecutionException e) {
            System.err.println("TestbedAcls: " + args[0] + ": " + e.getCause());
            System.exit(1);
        } catch (TimeoutException e) {
            System.err.println("TestbedAcls: " + args[0] + " did not answer within " + TIMEOUT_MS + " ms");
            System.exit(1);
        }
        System.out.println("ok " + scram.size() + " credentials, " + acls.size() + " ACL bindings on " + args[0]);
    }

    private static void parse(List<String> lines, List<UserScramCredentialAlteration> scram, List<AclBinding> acls) {
        int n = 0;
        for (String raw : lines) {
            n++;
            String line = raw.trim();
            if (line.isEmpty() || line.startsWith("#")) {
                continue;
            }
            String[] f = line.split("\\s+");
            if (f[0].equals("scram") && f.length == 4) {
                ScramMechanism mech = ScramMechanism.fromMechanismName(f[1]);
                if (mech == ScramMechanism.UNKNOWN) {
                    throw new IllegalArgumentException("line " + n + ": unknown SCRAM mechanism " + f[1]);
                }
                scram.add(new UserScramCredentialUpsertion(f[2], new ScramCredentialInfo(mech, 4096), f[3]));
            } else if (f[0].equals("acl") && f.length == 7) {
                ResourcePattern pattern =
                    new ResourcePattern(ResourceType.fromString(f[2]), f[4], PatternType.fromString(f[3]));
                AclPermissionType permission = AclPermissionType.fromString(f[6]);
                for (String op : f[5].split(",")) {
                    AclOperation operation = AclOperation.fromString(op);
                    if (operation == AclOperation.UNKNOWN || permission == AclPermissionType.UNKNOWN
                        || pattern.isUnknown()) {
                        throw new IllegalArgumentException("line " + n + ": cannot parse '" + line + "'");
                    }
                    acls.add(new AclBinding(pattern, new AccessControlEntry(f[1], "*", operation, permission)));
                }
            } else {
                throw new IllegalArgumentException("line " + n + ": expected 'scram MECH USER PASSWORD' or 'acl PRINCIPAL TYPE PATTERN NAME OPS ALLOW|DENY', got '" + line + "'");
            }
        }
    }
}
