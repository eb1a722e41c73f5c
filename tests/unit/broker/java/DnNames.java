import java.io.FileInputStream;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;

/** Prints each PEM certificate's subject as Kafka sees it: X500Principal.getName() (RFC 2253). */
public class DnNames {
    public static void main(String[] args) throws Exception {
        CertificateFactory cf = CertificateFactory.getInstance("X.509");
        for (String path : args) {
            try (FileInputStream in = new FileInputStream(path)) {
                X509Certificate cert = (X509Certificate) cf.generateCertificate(in);
                System.out.println(cert.getSubjectX500Principal().getName());
            }
        }
    }
}
